"""Output: the report model's renderings (table, JSON, Markdown, HTML) and the archive to S3.
The report itself is computed by audit/pipeline.py; nothing here computes a score.
"""
