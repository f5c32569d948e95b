"""Published runs kept in the repository as data with their sources (``published_runs.csv``, its
README), and their reader (``published``): the cost model's fidelity checks and calibration start here."""
