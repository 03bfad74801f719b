"""Scenario generator: realistic synthetic multi-node training jobs with ground truth.

Writes bundles in the real file formats (one PyTorch-profiler Kineto trace per rank, NCCL debug
logs as ``NCCL_DEBUG_FILE=%h.%p`` writes them) from a physics model of the job, and beside each
bundle a ``truth.json`` that says what an analysis should find (cause, culprits, time lost) and
the planted numbers to check measurements against.

>>> import tempfile
>>> from stallscope.samples import generate
>>> t = generate("compute_straggler", out=tempfile.mkdtemp(), seed=1, nodes=2, gpus=4, steps=3, logs="none")
>>> (t.cause, t.culprit_ranks == [t.knobs["culprit_rank"]])
('synchronization', True)

This package must not import ``stallscope.analysis`` or ``stallscope.rules``: the generator is
the test bed for them and stays independent.
"""

from __future__ import annotations

from stallscope.samples.generator import generate, suite
from stallscope.samples.scenarios import SCENARIOS, Knobs
from stallscope.samples.truth import GroundTruth

__all__ = ["SCENARIOS", "GroundTruth", "Knobs", "generate", "suite"]
