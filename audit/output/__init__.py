"""Output: the report of a job (audit/output/report.py builds it from the three rooms below it),
its renderings (table, JSON, Markdown, HTML) and the archive to S3.
"""
