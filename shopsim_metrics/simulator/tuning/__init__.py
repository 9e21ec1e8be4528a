"""``tune``: ``over_sampling_batch_size`` chosen by simulation (``tune.py``), the simulator's cost model calibrated from
a run's own records (``calibration.py``), and a run's rates measured step by step (``step_rates.py``)."""
