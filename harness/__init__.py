"""Prompt-persistence evaluation harness: how long does a system prompt keep steering a model?"""

from harness.errors import HarnessError, UserError

__version__ = "0.1.0"
__all__ = ["HarnessError", "UserError", "__version__"]
