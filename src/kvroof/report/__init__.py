"""`kvroof report`: the paper's analysis reproduced and extended, in one folder."""

from kvroof.report.config import ReportConfig, load_report_config
from kvroof.report.run import ReportResult, build_report

__all__ = ["ReportConfig", "ReportResult", "build_report", "load_report_config"]
