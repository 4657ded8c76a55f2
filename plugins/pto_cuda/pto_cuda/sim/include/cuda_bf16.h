/* CPU simulator stand-in: see pto_cuda_sim.h */
#pragma once
#include "pto_cuda_sim.h"
