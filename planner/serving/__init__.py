"""Serving plans: ``serve_estimate`` (one deployment) and ``serve_plan`` (the search), their schema,
validator, engine exports (vLLM, SGLang, TensorRT-LLM) and HTML report. Heavy parts load on use."""
