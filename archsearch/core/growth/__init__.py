"""Growing networks at expressivity bottlenecks ("Spotting expressivity bottlenecks and
fixing them optimally"): closed forms of Props. 3.1-3.2 (`solver`), one layer's growth step
with its line search (`layer_step`), its convolutional twin over unfolded patches (`conv`,
applied to every layer of a CNN's chain by `cnn_step`), the schedule's rules (`schedule`),
the resumable loop (`loop`) and time-matched fixed-architecture baselines (`timed`)."""
