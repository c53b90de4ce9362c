"""Analysis: the estimators and the run-level tables, over numpy arrays and pandas frames.

- `powerlaw`: power-law fits of divergence curves (alpha, CI, local exponent, reference curves);
- `relay`: the exactly solvable linear relay model;
- `fits`: the fits table; `summary`, `correlation`, `predictor`, `policies`, `calibration`,
  `carried`, `linkage`, `conversations`: the tables of the analyse stage; `gates`: thresholds
  on summary.csv.

Import the module you need (`from harness.analysis.summary import summarise_conditions`): the
package itself imports nothing, so loading one estimator does not load every table builder.
"""
