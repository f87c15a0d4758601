"""calib: calibration metrics, focal losses and post-hoc calibration, the library under the focal-calibration book.

Modules (an import only goes downward; see DESIGN.md):

- layer 0: ``calib._validate`` (input checking), ``calib.symbolic`` (sympy derivations), ``calib.focal`` (the
  focal family as numpy functions)
- layer 1: ``calib.metrics`` (calibration and accuracy metrics)
- layer 2: ``calib.posthoc`` (temperature scaling and friends)
- layer 4: ``calib.plots``, ``calib.claims``, ``calib.book``, ``calib.cli``

Submodules are imported on demand (``import calib.metrics``), so that ``import calib`` stays cheap.
"""

__version__ = "0.1.0"
