/* tc_sigmismatch_def.c — defines tc_scale(int); see tc_sigmismatch_use.c. */
int tc_scale(int x) { return 3 * x; }
