"""The engine's device side: the warp code the block kernel is compiled from (one warp thread per slot).

* :mod:`~ik_layer.engine.device.kernel`: the fused LM block kernel and the slots' structs it binds;
* built from :mod:`~ik_layer.engine.device.pose_cost` (pose error, Jacobian, cost),
  :mod:`~ik_layer.engine.device.damped_step` (the damped step), :mod:`~ik_layer.engine.device.configuration`
  (limits, wrapping, integration), :mod:`~ik_layer.engine.device.collision_step` (the collision term) and
  :mod:`~ik_layer.engine.device.restarts` (random starts and restarts).

The host side (slots, stores, launches, the scheduler) is :mod:`ik_layer.engine`'s other modules.
"""
