"""An upgrade's states, gates and plan (the operator's upgrade-state machine), and
PodDisruptionBudgets."""
