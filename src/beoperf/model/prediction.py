"""The documents of `beoperf predict` and `beoperf replay` (kinds "prediction", "replay").

* prediction: an application's message profile (``model.profile``) and, per network
  (a measured ping-pong run, a run's model scaled to another rate, or a model given),
  the model used (pieces, residual ranges, the sizes it was fitted on), each message
  class's predicted time with its interval and whether the method claims it, the total,
  its interval, the ratio to the first network and, with a compute time, the whole
  run's time and speedup (Amdahl); the method in words.  Times in seconds (``*_s``),
  model times in microseconds (``*_us``), rates in bit/s.
* replay: the same profile's messages sent to a `beoperf serve` peer and timed: per
  class and in total, each repeat's time, the median and range, both ends' facts.

Version 1 is the first; the analysis (beoperf.analysis.predict) and the replay
(beoperf.sweep.replay) write them.  A prediction's typed body is
beoperf.analysis.predict.Prediction (its model and classes are the analysis' own types).
"""

from __future__ import annotations

from beoperf.model import document

PREDICTION, REPLAY = "prediction", "replay"
VERSION = 1

document.register(PREDICTION, VERSION)
document.register(REPLAY, VERSION)
