"""The operator rollout: the gates, the facts and first step, why a node waits, the staging loop behind
its ports."""
