"""lm-eval's IFEval checkers load without lm-eval's task manager or NLTK's scikit-learn bridge,
and leave both importable afterwards (harness.checks.ifeval_offline._light_imports)."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import json, sys
from harness.checks.ifeval_offline import ifeval_registry
registry = ifeval_registry()
loaded = {m: m in sys.modules for m in ("datasets", "sklearn", "lm_eval.tasks")}
checker = registry.INSTRUCTION_DICT["punctuation:no_comma"]("punctuation:no_comma")
checker.build_description()
verdicts = [checker.check_following("no commas here"), checker.check_following("a, b")]
import lm_eval.tasks  # the real package, its __init__ run now
import sklearn
print(json.dumps({
    "loaded": loaded, "verdicts": verdicts, "checkers": len(registry.INSTRUCTION_DICT),
    "task_manager": hasattr(lm_eval.tasks, "TaskManager"),
    "sklearn": hasattr(sklearn, "__version__"),
}))
"""


def test_checkers_load_light_and_leave_the_packages_importable():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True)
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["loaded"] == {"datasets": False, "sklearn": False, "lm_eval.tasks": False}
    assert found["verdicts"] == [True, False]
    assert found["checkers"] >= 25
    assert found["task_manager"] and found["sklearn"]
