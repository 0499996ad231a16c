"""The memory planner, and the GPU probe beside it.

  gpu.py       what GPU this process sees and how much memory it has
"""
