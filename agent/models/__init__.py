"""One call interface over the providers: a model from its spec, one module per SDK that classifies its own
errors, retries, pacing, prices, the response and prompt caches, scripted models, the run's halt gate and the
names of answers cut short."""
