"""Collision geometry: obstacles in the base frame and their signed distances (:mod:`ik_layer.collision.shapes`)."""
