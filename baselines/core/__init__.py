"""Trainer core: pure algorithms (``algos``), typed configs (``config``), atomic
checkpoints (``checkpoint``) and metrics logging (``logging``).

Import from the submodules (``from baselines.core.algos import sequential_gae``);
this package imports nothing heavy on its own.
"""
