"""The memory planner: what each profile stores, what a checkpoint's shape costs, the plan that fits a card, where
quality best's fusion model goes, and the decision the server runs with; the GPU probe beside them.

  tiers.py     the memory profiles (tiers) in the order the planner walks them, and their names, defined once
  shapes.py    a checkpoint's shape, and the bytes its weights, KV cache and scratch take
  decision.py  the typed plan: Decision, and FusionPlan for quality best (JSON in the decision file)
  plan.py      the plan for one model on one card: the tier, the KV arena, the segments in flight
  fusion.py    the fusion model placed beside the translation model, or refused
  decide.py    the decision the server runs with: the entrypoint's file, else planned now
  gpu.py       what GPU this process sees and how much memory it has

The planner reads the settings it is handed by their attributes and imports no hymt.settings, which takes its
profile names from tiers.py (as the command line and the OpenAPI document do). decide.py reads the checkpoint's
config through hymt.checkpoint, as the engine's loader does; the planner imports nothing from the engine.
"""
