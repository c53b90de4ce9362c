from harness.cli import main

if __name__ == "__main__":  # vLLM spawns processes that re-import __main__
    main()
