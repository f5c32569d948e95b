"""Published reference data shipped with meshplan (training and serving runs) and their readers."""
