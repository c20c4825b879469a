# The allowed include directions (DESIGN.md section 1). check_layers.cmake fails the build when
# a file under src/<layer>/ includes "<other>/..." for an <other> not listed here.
set(MET_LAYERS core tree device model avail planner estimate report cli)
set(MET_ALLOW_core "")
set(MET_ALLOW_tree core)
set(MET_ALLOW_device core tree)
set(MET_ALLOW_model core tree)
set(MET_ALLOW_avail core tree device model)
set(MET_ALLOW_planner core tree device model avail)
set(MET_ALLOW_estimate core tree device model avail planner)
set(MET_ALLOW_report core tree device model avail planner estimate)
set(MET_ALLOW_cli core tree device model avail planner estimate report)
