(** The k-way merge of kernel/merge (merge.go) and LIMIT/OFFSET pushdown.

    The Go code merges with a loser tree; its specification, which this file proves of the
    definition below, is "concatenate the shards in index order, sort stably, apply OFFSET and
    LIMIT". The definition here merges pairwise, shard 0 with the merge of the rest, ties going
    to the lower shard; the differential test holds the loser tree to it. *)
From Coq Require Import ZArith List Bool Lia Sorting.Sorted Sorting.Permutation.
From Loam Require Import Values.
Import ListNotations.
Open Scope Z_scope.

Section Stable.
  Context {A : Type} (leb : A -> A -> bool).
  Hypothesis leb_total : forall a b, leb a b = false -> leb b a = true.
  Hypothesis leb_trans : forall a b c, leb a b = true -> leb b c = true -> leb a c = true.

  (** Two sorted lists merged, ties to the left. *)
  Fixpoint merge2 (l1 l2 : list A) : list A :=
    let fix m2 l2 :=
      match l1, l2 with
      | [], _ => l2
      | _, [] => l1
      | a1 :: l1', a2 :: l2' => if leb a1 a2 then a1 :: merge2 l1' l2 else a2 :: m2 l2'
      end in
    m2 l2.

  Lemma merge2_nil_l : forall l, merge2 [] l = l.
  Proof. destruct l; reflexivity. Qed.
  Lemma merge2_nil_r : forall l, merge2 l [] = l.
  Proof. destruct l; reflexivity. Qed.
  Lemma merge2_cons : forall a1 l1 a2 l2,
      merge2 (a1 :: l1) (a2 :: l2) =
      if leb a1 a2 then a1 :: merge2 l1 (a2 :: l2) else a2 :: merge2 (a1 :: l1) l2.
  Proof. reflexivity. Qed.

  (** Insertion sort: the stable sort. [insert x l] puts x before the first element it does not
      follow, so of two tying elements the earlier in the input comes first. *)
  Fixpoint insert (x : A) (l : list A) : list A :=
    match l with
    | [] => [x]
    | y :: l' => if leb x y then x :: y :: l' else y :: insert x l'
    end.

  Fixpoint isort (l : list A) : list A :=
    match l with [] => [] | x :: l' => insert x (isort l') end.

  Definition le a b := leb a b = true.

  Lemma insert_cons : forall x y l, insert x (y :: l) = if leb x y then x :: y :: l else y :: insert x l.
  Proof. reflexivity. Qed.

  Lemma insert_merge2 : forall x a b, insert x (merge2 a b) = merge2 (insert x a) b.
  Proof.
    intros x a. induction a as [|a1 a IHa]; intros b.
    - rewrite merge2_nil_l. change (insert x []) with [x]. induction b as [|b1 b IHb]; [reflexivity|].
      rewrite insert_cons. destruct (leb x b1) eqn:E.
      + rewrite merge2_cons, E. rewrite merge2_nil_l. reflexivity.
      + rewrite merge2_cons, E, <- IHb. reflexivity.
    - induction b as [|b1 b IHb].
      + rewrite !merge2_nil_r. reflexivity.
      + rewrite merge2_cons. rewrite (insert_cons x a1 a). destruct (leb x a1) eqn:Exa.
        * destruct (leb a1 b1) eqn:Eab.
          -- rewrite insert_cons, Exa. rewrite (merge2_cons x _ b1 b).
             rewrite (leb_trans _ _ _ Exa Eab). rewrite merge2_cons, Eab. reflexivity.
          -- rewrite insert_cons. destruct (leb x b1) eqn:Exb.
             ++ rewrite merge2_cons, Exb, merge2_cons, Eab. reflexivity.
             ++ rewrite IHb. rewrite insert_cons, Exa. rewrite (merge2_cons x _ b1 b), Exb. reflexivity.
        * destruct (leb a1 b1) eqn:Eab.
          -- rewrite insert_cons, Exa, IHa. rewrite merge2_cons, Eab. reflexivity.
          -- rewrite insert_cons. destruct (leb x b1) eqn:Exb.
             ++ exfalso. pose proof (leb_total _ _ Eab) as Hb. pose proof (leb_trans _ _ _ Exb Hb). congruence.
             ++ rewrite IHb. rewrite insert_cons, Exa. rewrite merge2_cons, Eab. reflexivity.
  Qed.

  Lemma isort_app : forall l r, isort (l ++ r) = merge2 (isort l) (isort r).
  Proof.
    induction l as [|x l IH]; intros r.
    - simpl. rewrite merge2_nil_l. reflexivity.
    - simpl. rewrite IH. apply insert_merge2.
  Qed.

  Lemma isort_sorted_id : forall l, Sorted le l -> isort l = l.
  Proof.
    induction 1 as [|x l Hs IH Hd]; [reflexivity|].
    simpl. rewrite IH. destruct l as [|y l]; [reflexivity|].
    inversion Hd; subst. simpl. unfold le in *. rewrite H0. reflexivity.
  Qed.

  Lemma insert_sorted : forall x l, Sorted le l -> Sorted le (insert x l).
  Proof.
    intros x l H. induction H as [|y l Hs IH Hd].
    - constructor; auto.
    - simpl. destruct (leb x y) eqn:E.
      + constructor; [constructor; auto|]. constructor. exact E.
      + constructor; auto.
        destruct l as [|z l]; simpl.
        * constructor. apply leb_total. exact E.
        * inversion Hd; subst. destruct (leb x z); constructor; [apply leb_total; exact E| assumption].
  Qed.

  Theorem isort_sorted : forall l, Sorted le (isort l).
  Proof. induction l; simpl; [constructor|apply insert_sorted; auto]. Qed.

  Lemma insert_perm : forall x l, Permutation (insert x l) (x :: l).
  Proof.
    induction l as [|y l IH]; simpl; [auto|].
    destruct (leb x y); [auto|].
    eapply perm_trans; [apply perm_skip; exact IH| apply perm_swap].
  Qed.

  Theorem isort_perm : forall l, Permutation (isort l) l.
  Proof.
    induction l as [|x l IH]; simpl; [auto|].
    eapply perm_trans; [apply insert_perm| auto].
  Qed.

  (** The k-way merge: shard 0 merged with the merge of the others. *)
  Fixpoint kmerge (ss : list (list A)) : list A :=
    match ss with [] => [] | s :: ss' => merge2 s (kmerge ss') end.

  Theorem kmerge_isort : forall ss, Forall (Sorted le) ss -> kmerge ss = isort (concat ss).
  Proof.
    induction 1 as [|s ss Hs Hss IH]; [reflexivity|].
    simpl. rewrite isort_app, IH, (isort_sorted_id s Hs). reflexivity.
  Qed.

  (** The first n of a merge come from the first n of each side. *)
  Lemma merge2_firstn : forall n m p a b, (n <= m)%nat -> (n <= p)%nat ->
      firstn n (merge2 a b) = firstn n (merge2 (firstn m a) (firstn p b)).
  Proof.
    induction n as [|n IH]; intros m p a b Hm Hp; [reflexivity|].
    destruct m as [|m]; [lia|]. destruct p as [|p]; [lia|].
    destruct a as [|a1 a]; destruct b as [|b1 b].
    - reflexivity.
    - change (firstn (S m) []) with (@nil A). rewrite !merge2_nil_l.
      rewrite firstn_firstn. f_equal. lia.
    - change (firstn (S p) []) with (@nil A). rewrite !merge2_nil_r.
      rewrite firstn_firstn. f_equal. lia.
    - change (firstn (S m) (a1 :: a)) with (a1 :: firstn m a).
      change (firstn (S p) (b1 :: b)) with (b1 :: firstn p b).
      rewrite !merge2_cons. destruct (leb a1 b1).
      + change (firstn (S n) (a1 :: ?l)) with (a1 :: firstn n l). f_equal.
        rewrite (IH m (S p) a (b1 :: b)) by lia. reflexivity.
      + change (firstn (S n) (b1 :: ?l)) with (b1 :: firstn n l). f_equal.
        rewrite (IH (S m) p (a1 :: a) b) by lia. reflexivity.
  Qed.

  Theorem kmerge_firstn : forall n ss, firstn n (kmerge ss) = firstn n (kmerge (map (firstn n) ss)).
  Proof.
    intros n. induction ss as [|s ss IH]; [reflexivity|].
    simpl. rewrite (merge2_firstn n n n s (kmerge ss)) by lia. rewrite IH.
    rewrite (merge2_firstn n n n (firstn n s) (kmerge (map (firstn n) ss))) by lia.
    rewrite firstn_firstn, Nat.min_id. reflexivity.
  Qed.
End Stable.

(** ** The merge of kernel/merge *)

(** A merged row carries its shard index ("from" in the protocol). *)
Definition tagged := (nat * row)%type.

Fixpoint tag (i : nat) (ss : list (list row)) : list (list tagged) :=
  match ss with [] => [] | s :: ss' => map (pair i) s :: tag (S i) ss' end.

Definition tleb (o : list key) (a b : tagged) : bool :=
  match rows_cmp o (snd a) (snd b) with Gt => false | _ => true end.

Lemma tleb_total : forall o a b, tleb o a b = false -> tleb o b a = true.
Proof.
  intros o a b. unfold tleb. rewrite (proj1 (rows_cmp_tp o) (snd a) (snd b)).
  destruct (rows_cmp o (snd a) (snd b)); simpl; congruence.
Qed.

Lemma tleb_trans : forall o a b c, tleb o a b = true -> tleb o b c = true -> tleb o a c = true.
Proof.
  intros o a b c. unfold tleb. pose proof (proj2 (rows_cmp_tp o) (snd a) (snd b) (snd c)) as T.
  destruct (rows_cmp o (snd a) (snd b)), (rows_cmp o (snd b) (snd c)), (rows_cmp o (snd a) (snd c));
    intros; try congruence; exfalso; apply T; congruence.
Qed.

(** A shard is sorted when no row sorts after the next one (what merge.go checks). *)
Definition row_le (o : list key) (a b : row) : Prop := rows_cmp o a b <> Gt.

Definition merge (o : list key) (ss : list (list row)) : list tagged := kmerge (tleb o) (tag 0 ss).

(** The specification: the stable sort of the shards concatenated in index order. *)
Definition stable_sort_concat (o : list key) (ss : list (list row)) : list tagged :=
  isort (tleb o) (concat (tag 0 ss)).

Lemma sorted_tag : forall o i s, Sorted (row_le o) s -> Sorted (le (tleb o)) (map (pair i) s).
Proof.
  intros o i s H. induction H as [|x l Hs IH Hd]; simpl; constructor; auto.
  destruct Hd; simpl; constructor. unfold le, tleb; simpl. unfold row_le in H.
  destruct (rows_cmp o x b); congruence.
Qed.

Lemma sorted_tags : forall o ss i, Forall (Sorted (row_le o)) ss -> Forall (Sorted (le (tleb o))) (tag i ss).
Proof.
  intros o ss. induction ss as [|s ss IH]; intros i H; simpl; constructor; inversion H; subst; auto.
  apply sorted_tag; auto.
Qed.

Theorem merge_stable_sort : forall o ss, Forall (Sorted (row_le o)) ss ->
    merge o ss = stable_sort_concat o ss.
Proof.
  intros o ss H. unfold merge, stable_sort_concat.
  apply kmerge_isort; [apply tleb_total|apply tleb_trans|apply sorted_tags; auto].
Qed.

Theorem merge_sorted : forall o ss, Forall (Sorted (row_le o)) ss ->
    Sorted (fun a b => row_le o (snd a) (snd b)) (merge o ss).
Proof.
  intros o ss H. rewrite merge_stable_sort by auto. unfold stable_sort_concat.
  pose proof (isort_sorted (tleb o) (tleb_total o) (concat (tag 0 ss))) as S.
  induction S as [|x l Hs IH Hd]; constructor; auto.
  destruct Hd; constructor. unfold le, tleb, row_le in *. destruct (rows_cmp o (snd x) (snd b)); congruence.
Qed.

Theorem merge_perm : forall o ss, Forall (Sorted (row_le o)) ss ->
    Permutation (merge o ss) (concat (tag 0 ss)).
Proof.
  intros o ss H. rewrite merge_stable_sort by auto. apply isort_perm.
Qed.

(** ** LIMIT and OFFSET *)

(** Integer-counted take and drop, so that the extracted code never builds a unary number. *)
Fixpoint ztake {A} (n : Z) (l : list A) : list A :=
  match l with [] => [] | x :: l' => if n <=? 0 then [] else x :: ztake (n - 1) l' end.
Fixpoint zdrop {A} (n : Z) (l : list A) : list A :=
  match l with [] => [] | x :: l' => if n <=? 0 then l else zdrop (n - 1) l' end.

Lemma ztake_firstn : forall {A} (l : list A) n, ztake n l = firstn (Z.to_nat n) l.
Proof.
  induction l as [|x l IH]; intros n; simpl.
  - destruct (Z.to_nat n); reflexivity.
  - destruct (n <=? 0) eqn:E.
    + replace (Z.to_nat n) with 0%nat by (apply Z.leb_le in E; lia). reflexivity.
    + apply Z.leb_gt in E. replace (Z.to_nat n) with (S (Z.to_nat (n - 1))) by lia.
      simpl. rewrite IH. reflexivity.
Qed.

Lemma zdrop_skipn : forall {A} (l : list A) n, zdrop n l = skipn (Z.to_nat n) l.
Proof.
  induction l as [|x l IH]; intros n; simpl.
  - destruct (Z.to_nat n); reflexivity.
  - destruct (n <=? 0) eqn:E.
    + replace (Z.to_nat n) with 0%nat by (apply Z.leb_le in E; lia). reflexivity.
    + apply Z.leb_gt in E. replace (Z.to_nat n) with (S (Z.to_nat (n - 1))) by lia.
      simpl. rewrite IH. reflexivity.
Qed.

(** LIMIT [lim] (None: no LIMIT) OFFSET [off] applied to an answer. *)
Definition window {A} (lim : option Z) (off : Z) (l : list A) : list A :=
  let l' := zdrop off l in
  match lim with None => l' | Some n => ztake n l' end.

Definition max_int64 : Z := 9223372036854775807.

(** What every shard must be asked for ("shard_limit"): limit + offset; 0 when the limit is
    0; no limit without one or when the sum passes 2^63-1 ([Limit.PerShard]). *)
Definition shard_limit (lim : option Z) (off : Z) : option Z :=
  match lim with
  | None => None
  | Some n => if n =? 0 then Some 0 else if n + off <=? max_int64 then Some (n + off) else None
  end.

Definition limit_rows {A} (lim : option Z) (l : list A) : list A :=
  match lim with None => l | Some n => ztake n l end.

Lemma tag_map : forall n ss i, tag i (map (ztake n) ss) = map (firstn (Z.to_nat n)) (tag i ss).
Proof.
  induction ss as [|s ss IH]; intros i; simpl; [reflexivity|].
  rewrite IH, ztake_firstn, firstn_map. reflexivity.
Qed.

(** Pushdown is exact: each shard cut to [shard_limit], merged, offset dropped and limit taken,
    is the same answer as the merge of the whole shards with the same OFFSET and LIMIT. No
    sortedness is needed for this: the merge only ever reads heads. *)
Theorem pushdown_exact : forall o ss lim off, 0 <= off -> (forall n, lim = Some n -> 0 <= n) ->
    window lim off (merge o (map (limit_rows (shard_limit lim off)) ss)) = window lim off (merge o ss).
Proof.
  intros o ss lim off Hoff Hlim. unfold window, shard_limit.
  assert (Hid : map (limit_rows None) ss = ss) by (rewrite <- (map_id ss) at 2; reflexivity).
  destruct lim as [n|]; [|rewrite Hid; reflexivity].
  pose proof (Hlim n eq_refl) as Hn.
  destruct (n =? 0) eqn:E0.
  { apply Z.eqb_eq in E0. subst. rewrite !ztake_firstn. reflexivity. }
  destruct (n + off <=? max_int64); [|rewrite Hid; reflexivity].
  unfold merge, limit_rows. rewrite !ztake_firstn, !zdrop_skipn.
  rewrite !firstn_skipn_comm. f_equal.
  replace (Z.to_nat off + Z.to_nat n)%nat with (Z.to_nat (n + off)) by lia.
  rewrite (map_ext (fun s => ztake (n + off) s) (ztake (n + off))) by reflexivity.
  rewrite tag_map. symmetry. apply kmerge_firstn.
Qed.

(** ** The merge request with its refusals (mergeWith of merge.go)

    A row lacking a column the ORDER BY reads is bad data, and outranks a shard whose rows
    are not sorted (every row is checked, not only those the LIMIT reads). *)
Inductive refusal := BadData | Unsorted | NotDecomposable.

Inductive outcome (A : Type) := Ok (a : A) | Refused (r : refusal).
Arguments Ok {A} a.
Arguments Refused {A} r.

Definition order_width (o : list key) : Z := fold_right (fun k w => Z.max (kcol k + 1) w) 0 o.

Definition wide_enough (w : Z) (r : row) : bool := w <=? Z.of_nat (length r).

Fixpoint sortedb (o : list key) (s : list row) : bool :=
  match s with
  | [] => true
  | a :: s' =>
      match s' with
      | [] => true
      | b :: _ => match rows_cmp o a b with Gt => false | _ => sortedb o s' end
      end
  end.

Lemma sortedb_cons2 : forall o a b s,
    sortedb o (a :: b :: s) = match rows_cmp o a b with Gt => false | _ => sortedb o (b :: s) end.
Proof. reflexivity. Qed.

Lemma sortedb_sorted : forall o s, sortedb o s = true <-> Sorted (row_le o) s.
Proof.
  intros o s. rewrite Sorted_LocallySorted_iff. split.
  - induction s as [|a s IH]; intros H; [constructor|].
    destruct s as [|b s]; [constructor|].
    rewrite sortedb_cons2 in H. destruct (rows_cmp o a b) eqn:E; try discriminate;
      constructor; auto; unfold row_le; congruence.
  - induction 1 as [|a|a b s Hs IH Hab]; auto.
    rewrite sortedb_cons2. unfold row_le in Hab. destruct (rows_cmp o a b); congruence.
Qed.

Definition merge_answer (o : list key) (lim : option Z) (off : Z) (ss : list (list row))
  : outcome (list tagged * option Z) :=
  if negb (forallb (forallb (wide_enough (order_width o))) ss) then Refused BadData
  else if negb (forallb (sortedb o) ss) then Refused Unsorted
  else Ok (window lim off (merge o ss), shard_limit lim off).

(** What the extracted oracle answers is the specification: the stable sort of the
    concatenation, with OFFSET and LIMIT, and the shard limit; it refuses unsorted input
    exactly when a shard is not sorted. *)
Theorem merge_answer_spec : forall o lim off ss rows sl,
    merge_answer o lim off ss = Ok (rows, sl) ->
    rows = window lim off (stable_sort_concat o ss) /\ sl = shard_limit lim off /\
    Forall (Sorted (row_le o)) ss.
Proof.
  intros o lim off ss rows sl. unfold merge_answer.
  destruct (forallb (forallb (wide_enough (order_width o))) ss); simpl; [|discriminate].
  destruct (forallb (sortedb o) ss) eqn:E; simpl; [|discriminate].
  intros H. injection H as <- <-.
  assert (HS : Forall (Sorted (row_le o)) ss).
  { apply Forall_forall. intros s Hin. apply sortedb_sorted.
    rewrite forallb_forall in E. auto. }
  rewrite merge_stable_sort by exact HS. auto.
Qed.

Theorem merge_answer_unsorted : forall o lim off ss,
    merge_answer o lim off ss = Refused Unsorted -> exists s, In s ss /\ ~ Sorted (row_le o) s.
Proof.
  intros o lim off ss. unfold merge_answer.
  destruct (forallb (forallb (wide_enough (order_width o))) ss); simpl; [|discriminate].
  destruct (forallb (sortedb o) ss) eqn:E; simpl; [discriminate|]. intros _.
  induction ss as [|s ss IH]; simpl in E; [discriminate|].
  destruct (sortedb o s) eqn:Es; simpl in E.
  - destruct (IH E) as [s' [Hin Hn]]. exists s'. simpl. auto.
  - exists s. simpl. split; auto. rewrite <- sortedb_sorted. congruence.
Qed.
