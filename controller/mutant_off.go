//go:build !loam_mutant_fresh

package controller

const freshStart = false
