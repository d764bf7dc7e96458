"""Where work runs side by side: the executors that run jobs (in this process, in threads, with a pool of test
processes, on Ray), the test slots that bound how many test runs start at once and on which GPU, early test runs
while a model is still answering, and the claims that let many processes share one output folder. It knows
nothing of a job's story: it runs the callables it is given."""
