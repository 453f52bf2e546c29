"""Judging a trial: the signature registry, the rules of rules.yaml, the detectors, and the one
rule every verdict passes on its way out (no excuse without proof, audit/judge/verdict.py).

Reads through audit/read only; knows nothing of scores or reports.
"""
