"""Intake: the user's model and cluster arguments turned into specs (``arguments``), the JSON files
users hand to meshplan read strictly (``jsonio``), model presets and Hugging Face configs
(``models``) and any ``torch.nn.Module`` traced on the ``meta`` device (``trace``)."""
