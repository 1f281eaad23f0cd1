"""The paper's Algorithms 1 and 2 as published, as hand-written kernels (one module each, with
the ``init``, ``step`` and ``Info`` of :mod:`bayesdp.inference.kernels`): :mod:`.normalx_paper`
(method ``"normalx-paper"``) and :mod:`.fixeds_paper` (method ``"fixeds-paper"``). They share the
core's kernel pieces (:mod:`bayesdp.inference.kernels.common`, ``linalg``, ``adaptation``).
"""
