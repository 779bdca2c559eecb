package refrouter

// BarrierSQL exposes barrierSQL to BenchmarkBarrierVisible.
var BarrierSQL = barrierSQL
