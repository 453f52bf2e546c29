"""Reading a job: where its files are (local or S3), Harbor's result and config files as models,
every agent log read to one shape per trial (model calls, commands, how the run ended), the
exception chain, whether the model was reached, and the cluster's own account on Kubernetes.

Nothing here judges: it reads what is there, notes what is missing or damaged, and never raises
for a bad file. It imports nothing from the other rooms of the audit.
"""
