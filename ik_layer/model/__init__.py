"""The robot model: URDF loading (Pinocchio), kinematic chains, joints and limits, Lie groups, the fused FK kernel."""
