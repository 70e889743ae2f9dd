"""Who explores at random: the Hypothesis machines.

- `memory`: the state machines whose rules are the protocol's operations on one driver;
- `explore`: running one machine with shrinking, a time budget and honest blame;
- `workers`: K driver processes on one shared store, with kills and takeovers, judged from
  outside by `jfsm_conformance.verify.ownership`.

The deterministic scenarios, which pin each requirement at its exact edges, are
`jfsm_conformance.scenarios`.
"""
