"""The differentiable layer: implicit-function-theorem gradients of IK solutions, and the Jacobian toolkit."""
