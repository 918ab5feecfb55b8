/*
 * libhtr - Hierarchical Trace Representation of Intel PT recordings.
 *
 * Umbrella header: include this one file to get the whole public API.
 */
#ifndef HTR_HTR_H
#define HTR_HTR_H

#include "common.h"
#include "error.h"
#include "tree.h"
#include "build.h"
#include "store.h"
#include "analyzer.h"
#include "analyze.h"
#include "builtins.h"
#include "cursor.h"
#include "cpuwide.h"
#include "perf.h"
#include "names.h"
#include "export.h"
#include "report.h"

#endif /* HTR_HTR_H */
