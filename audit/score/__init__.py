"""Scoring a job: the raw and adjusted scores with their intervals, attempts and pass@k, the
merge with reruns, the leaderboard conformance, adjudications, and whether the raw score can be
quoted. Reads the verdicts of audit/judge; knows nothing of how reports are rendered.
"""
