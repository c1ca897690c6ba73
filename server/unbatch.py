"""Stage 3, unbatch: the prediction of a batch -> one prediction per job, rows in the jobs' order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields

from ik_layer import IKResult
from ik_layer.server.decode import IKJob
from ik_layer.server.predict import Prediction

__all__ = ["unbatch"]


def unbatch(prediction: Prediction, jobs: Sequence[IKJob]) -> list[Prediction]:
    """Split ``prediction`` of the rows of ``jobs`` (concatenated in order) into one prediction per job."""
    sizes = [job.rows for job in jobs]
    columns = {f.name: getattr(prediction.result, f.name).split(sizes) for f in fields(IKResult)}
    asked = prediction.asked.split(sizes)
    gradients = prediction.gradient.split([int(rows.sum()) for rows in asked])
    return [
        Prediction(result=IKResult(**{name: parts[i] for name, parts in columns.items()}), asked=asked[i], gradient=g)
        for i, g in enumerate(gradients)
    ]
