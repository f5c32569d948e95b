"""The plan: its schema (plain data, at the bottom of the package), the request's constraints,
building a plan from a search result (``build``) or from one given configuration (``given``),
reading a plan and the model it names (``files``, ``load``), and the checks of a configuration
(``config_checks``), of each target engine's rules (``target_rules``) and of a whole plan
(``plan_checks``). Everything here is called with a plan; the schema calls nothing back."""
