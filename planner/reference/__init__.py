"""Published runs kept in the repository as data with their sources (``published_runs.csv`` for
training, ``serving_runs.csv`` for serving, their README), and their readers (``published``,
``serving_runs``): the cost model's fidelity checks and calibration start here."""
