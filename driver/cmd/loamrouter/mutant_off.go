//go:build !loam_mutant_fresh

package main

const freshStart = false
