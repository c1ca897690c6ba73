"""Trajectories: sequences of targets solved frame by frame on the engine, within joint velocity limits.

:func:`~ik_layer.trajectory.solve.solve_trajectory` solves clips of T frames (many clips at once),
:func:`~ik_layer.trajectory.gradient.ik_trajectory` differentiates them over the whole sequence; both are exported
by :mod:`ik_layer`. :mod:`ik_layer.trajectory.problem` checks the inputs once, :mod:`ik_layer.trajectory.bounded`
re-solves a frame inside its velocity box, :mod:`ik_layer.trajectory.lookahead` re-plans a clip whose greedy frames
fell out of reach.
"""
