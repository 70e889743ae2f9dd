"""The step vocabulary: one method of `session.Session` a step, acting on the `world.World`
(the driver, the fake compress.v2 and the expected state), predicting with the model and
checking with the verifier.

A step is the unit the suite records, replays and blames; the scenarios and the machines
choose the steps, and a trace is a list of them.
"""
