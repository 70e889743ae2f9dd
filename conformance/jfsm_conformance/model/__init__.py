"""The model of expected state, written from the spec and never from the engine.

- `canon`: the suite's own copies of the spec's pure rules (canonical text, JCS, footprint,
  keys);
- `oracle`: one game's observable memory, from the operations the suite performed;
- `predictor`: which compressions an operation must run and how each ends, and what
  compress.v2 remembers between steps;
- `replies`: the scripted compress.v2 replies, one vocabulary for the fake and the predictor;
- `encoded`: a store encoded once (each key's JCS text and what the checks derive from it);
- `texts`: texts of exact code-point lengths, in several flavours, with canaries.

Pure: nothing here talks to a driver or to the fake.
"""
