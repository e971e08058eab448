// sweep-train: trains one run of the built-in decoder from its config file and writes its
// record. Start it directly (one rank) or under mpirun / srun (dist.world_size ranks).
// Its command line and exit codes are train_main's (sweep/trainer.h): a program of your
// own with models of its own is this file with more models added.
#include "sweep/trainer.h"

int main(int argc, char** argv) { return sweep::train_main(argc, argv, sweep::builtin_models()); }
