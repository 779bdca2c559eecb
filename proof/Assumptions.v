(** What each main theorem rests on. make proof writes one file per theorem
    (_build/assumptions/<theorem>.out); a Go test (proof/assumptions_test.go) requires each
    to read "Closed under the global context": nothing admitted, no axioms. *)
From Loam Require Import Values Merge Aggregate Partition Decompose.
Redirect "assumptions/merge_stable_sort" Print Assumptions merge_stable_sort.
Redirect "assumptions/merge_sorted" Print Assumptions merge_sorted.
Redirect "assumptions/merge_perm" Print Assumptions merge_perm.
Redirect "assumptions/merge_answer_spec" Print Assumptions merge_answer_spec.
Redirect "assumptions/merge_answer_unsorted" Print Assumptions merge_answer_unsorted.
Redirect "assumptions/pushdown_exact" Print Assumptions pushdown_exact.
Redirect "assumptions/check_partition_iff" Print Assumptions check_partition_iff.
Redirect "assumptions/accepted_unique_owner" Print Assumptions accepted_unique_owner.
Redirect "assumptions/isort_sorted" Print Assumptions isort_sorted.
Redirect "assumptions/isort_perm" Print Assumptions isort_perm.
Redirect "assumptions/kmerge_isort" Print Assumptions kmerge_isort.
Redirect "assumptions/kmerge_firstn" Print Assumptions kmerge_firstn.
Redirect "assumptions/check_exact" Print Assumptions check_exact.
Redirect "assumptions/combine_union_hom" Print Assumptions combine_union_hom.
Redirect "assumptions/sum_combine_union" Print Assumptions sum_combine_union.
Redirect "assumptions/best_combine_union" Print Assumptions best_combine_union.
Redirect "assumptions/count_combine_union" Print Assumptions count_combine_union.
Redirect "assumptions/avg_combine_union" Print Assumptions avg_combine_union.
Redirect "assumptions/group_of_union" Print Assumptions group_of_union.
Redirect "assumptions/check_at_wrong" Print Assumptions check_at_wrong.
Redirect "assumptions/check_at_minimal" Print Assumptions check_at_minimal.
