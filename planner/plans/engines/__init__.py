"""Each target engine's translation of a plan, with its refusals (Megatron-LM, torchtitan, DeepSpeed).

These are the engines' rules in executable form: ``megatron``, ``torchtitan`` and ``deepspeed`` turn a
checked plan into the engine's settings or refuse, with :class:`common.UnsupportedPlanError`, what the
engine cannot express; ``common`` holds the shared pieces (the error, chunks, the decoder check);
``engines`` puts the three behind one call (:func:`engines.engine_export`) and refuses, before any
search, models an engine's launcher cannot build (:func:`engines.check_model_for`). They sit in
``planner.plans`` because the plan's validator and the builder ask them for the last word; the text
forms ``meshplan export`` writes (``planner.outputs.export``) are built on top of them.
"""
