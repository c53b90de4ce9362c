"""The self-contained HTML report of a run folder (`harness report DIR`)."""

from harness.report.render import render_report

__all__ = ["render_report"]
