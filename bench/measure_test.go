package main

import (
	"testing"
)

func TestPercentiles(t *testing.T) {
	var v []float64
	for i := 1; i <= 100; i++ {
		v = append(v, float64(i))
	}
	p := percentiles(v)
	if p.P50 != 50 || p.P90 != 90 || p.P99 != 99 || p.Max != 100 || p.Count != 100 {
		t.Fatalf("%+v", p)
	}
	if p := percentiles(nil); p.Count != 0 {
		t.Fatalf("%+v", p)
	}
}

func TestRateLimiterStats(t *testing.T) {
	before := parseProm([]byte(`rest_client_rate_limiter_duration_seconds_bucket{host="h",verb="POST",le="0.005"} 10
rest_client_rate_limiter_duration_seconds_bucket{host="h",verb="POST",le="0.025"} 10
rest_client_rate_limiter_duration_seconds_sum{host="h",verb="POST"} 0.01
rest_client_rate_limiter_duration_seconds_count{host="h",verb="POST"} 10
`))
	after := parseProm([]byte(`rest_client_rate_limiter_duration_seconds_bucket{host="h",verb="POST",le="0.005"} 100
rest_client_rate_limiter_duration_seconds_bucket{host="h",verb="POST",le="0.025"} 105
rest_client_rate_limiter_duration_seconds_sum{host="h",verb="POST"} 2.01
rest_client_rate_limiter_duration_seconds_count{host="h",verb="POST"} 110
rest_client_rate_limiter_duration_seconds_bucket{host="h",verb="PATCH",le="0.025"} 5
rest_client_rate_limiter_duration_seconds_sum{host="h",verb="PATCH"} 0
rest_client_rate_limiter_duration_seconds_count{host="h",verb="PATCH"} 5
`))
	st := rateLimiterStats(before, after, 105)
	if !st.Exposed || st.WaitSeconds != 2 || st.Waits != 105 || st.WaitsOver25ms != 5 || st.MeanWaitMS != round3(2000.0/105) {
		t.Fatalf("%+v", st)
	}
	if st := rateLimiterStats(nil, parseProm([]byte("executor_api_requests_total 3\n")), 3); st.Exposed {
		t.Fatalf("not served, but %+v", st)
	}
}
