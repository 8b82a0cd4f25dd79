"""The job queue: the background worker that runs every capability's registered jobs; `cortex queue work`."""
