"""The memory planner: what a checkpoint's shape costs, the plan that fits a card, where quality best's fusion model
goes, and the decision the server runs with; the GPU probe beside them.

  shapes.py    a checkpoint's shape, and the bytes its weights, KV cache and scratch take
  decision.py  the typed plan: Decision, and FusionPlan for quality best (JSON in the decision file)
  plan.py      the plan for one model on one card: the tier, the KV arena, the segments in flight
  fusion.py    the fusion model placed beside the translation model, or refused
  decide.py    the decision the server runs with: the entrypoint's file, else planned now
  gpu.py       what GPU this process sees and how much memory it has

It is handed the Settings. The profiles it walks (hymt.tiers) sit below it and below hymt.settings, which checks
HYMT_PROFILE against their names (as the command line and the OpenAPI document do). decide.py reads the
checkpoint's config through hymt.checkpoint, as the engine's loader does; the planner imports nothing from the
engine.
"""
