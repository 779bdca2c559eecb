(** Each decomposed aggregate, combined, is the aggregate over the union: folding every
    shard's partial value (what the shard's query returns) into the combination gives the
    same partial as folding all the shards' raw values, in shard order, directly. Stated for
    the functions the oracle runs (fold_raw, fold_partial, pvalue of Aggregate.v). *)
From Coq Require Import ZArith List Bool Lia.
From Loam Require Import Values Merge Aggregate.
Import ListNotations.
Open Scope Z_scope.

Definition bind {A B} (o : outcome A) (k : A -> outcome B) : outcome B :=
  match o with Ok a => k a | Refused e => Refused e end.

(** One column's values folded into a partial state. *)
Fixpoint fold_vals (step : func -> value -> pstate -> outcome pstate) (f : func) (vs : list value) (st : pstate)
  : outcome pstate :=
  match vs with [] => Ok st | v :: vs' => bind (step f v st) (fold_vals step f vs') end.

Lemma fold_vals_app : forall step f l1 l2 st,
    fold_vals step f (l1 ++ l2) st = bind (fold_vals step f l1 st) (fold_vals step f l2).
Proof.
  intros step f l1. induction l1 as [|v l1 IH]; intros l2 st; simpl; [reflexivity|].
  destruct (step f v st); simpl; auto.
Qed.

(** What one shard returns for the aggregate: the partial of its raw values. *)
Definition shard_value (f : func) (vs : list value) : value :=
  match fold_vals fold_raw f vs pempty with Ok st => pvalue f st | Refused _ => VNull end.

(** The generic argument: a fold whose steps are homomorphisms into an associative
    combination with a unit, read through [proj]. *)
Section Hom.
  Variable f : func.
  Variable X : Type.
  Variable proj : pstate -> X.
  Variable op : X -> X -> X.
  Hypothesis op_assoc : forall a b c, op (op a b) c = op a (op b c).
  Hypothesis op_runit : forall a, op a (proj pempty) = a.
  (** A raw step succeeds or fails whatever the state, and adds what it adds from the empty state. *)
  Hypothesis raw_ok : forall v st st', fold_raw f v st = Ok st' -> exists s1, fold_raw f v pempty = Ok s1.
  Hypothesis raw_ok' : forall v st s1, fold_raw f v pempty = Ok s1 -> exists st', fold_raw f v st = Ok st'.
  Hypothesis raw_hom : forall v st st' s1, fold_raw f v st = Ok st' -> fold_raw f v pempty = Ok s1 ->
      proj st' = op (proj st) (proj s1).
  (** Folding a shard's partial value adds what the shard's raw values added. *)
  Hypothesis part_hom : forall vs s0 st, fold_vals fold_raw f vs pempty = Ok s0 ->
      exists st', fold_partial f (pvalue f s0) st = Ok st' /\ proj st' = op (proj st) (proj s0).

  Lemma fold_raw_any : forall vs st st2 s0, fold_vals fold_raw f vs st = Ok s0 ->
      exists s2, fold_vals fold_raw f vs st2 = Ok s2.
  Proof.
    induction vs as [|v vs IH]; intros st st2 s0 H; simpl in *; [eauto|].
    destruct (fold_raw f v st) as [a|] eqn:E; simpl in H; [|discriminate].
    destruct (raw_ok _ _ _ E) as [s1 E1]. destruct (raw_ok' _ st2 _ E1) as [b E2].
    rewrite E2. simpl. eapply IH. exact H.
  Qed.

  Lemma fold_raw_hom : forall vs st st', fold_vals fold_raw f vs st = Ok st' ->
      exists s0, fold_vals fold_raw f vs pempty = Ok s0 /\ proj st' = op (proj st) (proj s0).
  Proof.
    induction vs as [|v vs IH]; intros st st' H; simpl in *.
    - injection H as <-. exists pempty. split; auto.
    - destruct (fold_raw f v st) as [st1|] eqn:E1; simpl in H; [|discriminate].
      destruct (raw_ok _ _ _ E1) as [s1 Es1]. rewrite Es1. simpl.
      destruct (IH _ _ H) as [s0' [H0' P']].
      destruct (fold_raw_any vs pempty s1 s0' H0') as [s0 H0].
      destruct (IH _ _ H0) as [s0'' [H0'' P'']].
      rewrite H0' in H0''. injection H0'' as <-.
      exists s0. split; auto.
      rewrite P', (raw_hom _ _ _ _ E1 Es1), P''. apply op_assoc.
  Qed.

  (** Combining the shards' partial values equals folding the union of their raw values. *)
  Theorem combine_union_hom : forall ss st_raw st_part stu, proj st_raw = proj st_part ->
      fold_vals fold_raw f (concat ss) st_raw = Ok stu ->
      exists stc, fold_vals fold_partial f (map (shard_value f) ss) st_part = Ok stc /\ proj stc = proj stu.
  Proof.
    induction ss as [|s ss IH]; intros st_raw st_part stu Hp H; simpl in *.
    - injection H as <-. exists st_part. auto.
    - rewrite fold_vals_app in H.
      destruct (fold_vals fold_raw f s st_raw) as [st1|] eqn:E1; simpl in H; [|discriminate].
      destruct (fold_raw_hom _ _ _ E1) as [s0 [H0 P0]].
      destruct (part_hom _ _ st_part H0) as [st2 [E2 P2]].
      unfold shard_value at 1. rewrite H0, E2. simpl.
      apply (IH st1 st2); auto. rewrite P0, P2, Hp. reflexivity.
  Qed.
End Hom.

(** ** SUM *)

Definition opt_add (a b : option (Z * Z)) : option (Z * Z) :=
  match a, b with
  | None, _ => b
  | _, None => a
  | Some x, Some y => Some (num_add x y)
  end.

Lemma pow10_mul : forall a b, 0 <= a -> 0 <= b -> pow10 a * pow10 b = pow10 (a + b).
Proof. intros a b Ha Hb. unfold pow10. rewrite Z.pow_add_r by lia. reflexivity. Qed.

Lemma num_add_assoc : forall a b c, num_add (num_add a b) c = num_add a (num_add b c).
Proof.
  intros [c1 s1] [c2 s2] [c3 s3]. unfold num_add.
  set (m12 := Z.max s1 s2). set (m23 := Z.max s2 s3).
  replace (Z.max m12 s3) with (Z.max s1 m23) by (unfold m12, m23; lia).
  set (M := Z.max s1 m23).
  assert (A1 : pow10 (m12 - s1) * pow10 (M - m12) = pow10 (M - s1)) by (rewrite pow10_mul by (unfold M, m12, m23; lia); f_equal; lia).
  assert (A2 : pow10 (m12 - s2) * pow10 (M - m12) = pow10 (M - s2)) by (rewrite pow10_mul by (unfold M, m12, m23; lia); f_equal; lia).
  assert (A3 : pow10 (m23 - s2) * pow10 (M - m23) = pow10 (M - s2)) by (rewrite pow10_mul by (unfold M, m12, m23; lia); f_equal; lia).
  assert (A4 : pow10 (m23 - s3) * pow10 (M - m23) = pow10 (M - s3)) by (rewrite pow10_mul by (unfold M, m12, m23; lia); f_equal; lia).
  f_equal.
  rewrite !Z.mul_add_distr_r, <- !Z.mul_assoc, A1, A2, A3, A4. ring.
Qed.

Lemma opt_add_assoc : forall a b c, opt_add (opt_add a b) c = opt_add a (opt_add b c).
Proof. intros [a|] [b|] [c|]; simpl; try reflexivity. rewrite num_add_assoc. reflexivity. Qed.

Theorem sum_combine_union : forall ss stu, fold_vals fold_raw Sum (concat ss) pempty = Ok stu ->
    exists stc, fold_vals fold_partial Sum (map (shard_value Sum) ss) pempty = Ok stc /\
                psum stc = psum stu /\ pvalue Sum stc = pvalue Sum stu.
Proof.
  intros ss stu H.
  destruct (combine_union_hom Sum _ psum opt_add opt_add_assoc) with (ss := ss) (st_raw := pempty) (st_part := pempty) (stu := stu)
    as [stc [E P]]; auto.
  - intros [[c s]|]; reflexivity.
  - intros v st st' Hv. destruct v; simpl in *; try discriminate; eauto.
  - intros v st s1 Hv. destruct v; simpl in *; try discriminate; eauto.
  - intros v st st' s1 H1 H2. destruct v; simpl in *; try discriminate;
      injection H1 as <-; injection H2 as <-; simpl; destruct (psum st); reflexivity.
  - intros vs s0 st _. cbn [pvalue]. destruct (psum s0) as [[c s]|] eqn:E; cbn;
      (eexists; split; [reflexivity|]); cbn; destruct (psum st); reflexivity.
  - exists stc. split; auto. split; auto. cbn [pvalue]. rewrite P. reflexivity.
Qed.

(** ** MIN and MAX: the last of equal values, which is an associative choice *)

Definition mop (f : func) (a b : value) : value :=
  match f, vcmp b a with Min, Gt | Max, Lt => a | _, _ => b end.

Definition opt_m (f : func) (a b : option value) : option value :=
  match a, b with
  | None, _ => b
  | _, None => a
  | Some x, Some y => Some (mop f x y)
  end.

Lemma mop_assoc : forall f a b c, (f = Min \/ f = Max) -> mop f (mop f a b) c = mop f a (mop f b c).
Proof.
  intros f a b c Hf. pose proof vcmp_tp as Htp. destruct Htp as [As T].
  destruct Hf; subst; unfold mop;
    destruct (vcmp b a) eqn:Eba; destruct (vcmp c b) eqn:Ecb; simpl;
    rewrite ?Eba, ?Ecb; try reflexivity;
    destruct (vcmp c a) eqn:Eca; try reflexivity; exfalso.
  all: first
    [ (* c > b > a but not c > a *)
      assert (L : vcmp a c = Lt) by (apply (tp_lt_trans vcmp vcmp_tp a b c); rewrite As; [rewrite Eba|rewrite Ecb]; reflexivity);
      rewrite As, Eca in L; discriminate
    | (* c <= b <= a but c > a *)
      apply (T c b a); congruence
    | (* c < b < a but not c < a *)
      assert (L : vcmp c a = Lt) by (apply (tp_lt_trans vcmp vcmp_tp c b a); assumption); congruence
    | (* c >= b >= a but c < a *)
      apply (T a b c); rewrite As; [rewrite Eba|rewrite Ecb|rewrite Eca]; simpl; congruence ].
Qed.

Lemma opt_m_assoc : forall f a b c, (f = Min \/ f = Max) -> opt_m f (opt_m f a b) c = opt_m f a (opt_m f b c).
Proof. intros f [a|] [b|] [c|] Hf; simpl; try reflexivity. rewrite mop_assoc by auto. reflexivity. Qed.

Lemma fold_best_spec : forall f v st, (f = Min \/ f = Max) -> v <> VNull ->
    pbest (fold_best f v st) = opt_m f (pbest st) (Some v).
Proof.
  intros f v st Hf Hv. unfold fold_best.
  destruct v as [|bb|cc sc|tt]; [congruence| | |]; destruct Hf; subst; unfold opt_m, mop;
    destruct (pbest st) as [x|] eqn:E; cbn -[vcmp]; try reflexivity;
    match goal with |- context [vcmp ?a x] => destruct (vcmp a x) end; cbn -[vcmp]; rewrite ?E; reflexivity.
Qed.

Lemma best_not_null : forall f vs st s0, (f = Min \/ f = Max) -> pbest st <> Some VNull ->
    fold_vals fold_raw f vs st = Ok s0 -> pbest s0 <> Some VNull.
Proof.
  intros f vs. induction vs as [|v vs IH]; intros st s0 Hf Hst H; simpl in H.
  - injection H as <-. auto.
  - assert (E : fold_raw f v st = Ok (fold_best f v st)) by (destruct Hf; subst; reflexivity).
    rewrite E in H. simpl in H. apply (IH (fold_best f v st) s0 Hf); [|exact H].
    destruct v as [|bb|cc sc|tt]; [simpl; auto| | |]; rewrite fold_best_spec by (auto; discriminate);
      destruct (pbest st) as [x|]; cbn -[vcmp]; try congruence; destruct Hf; subst; unfold mop;
      match goal with |- context [vcmp ?a x] => destruct (vcmp a x) end; congruence.
Qed.

Theorem best_combine_union : forall f ss stu, (f = Min \/ f = Max) ->
    fold_vals fold_raw f (concat ss) pempty = Ok stu ->
    exists stc, fold_vals fold_partial f (map (shard_value f) ss) pempty = Ok stc /\
                pvalue f stc = pvalue f stu.
Proof.
  intros f ss stu Hf H.
  assert (Eraw : forall v st, fold_raw f v st = Ok (fold_best f v st)) by (destruct Hf; subst; reflexivity).
  assert (Epart : forall v st, fold_partial f v st = Ok (fold_best f v st)) by (destruct Hf; subst; reflexivity).
  assert (Hom : forall v st, pbest (fold_best f v st) = opt_m f (pbest st) (pbest (fold_best f v pempty))).
  { intros v st. destruct v; [cbn; destruct (pbest st); reflexivity| | |]; rewrite !fold_best_spec by (auto; discriminate); reflexivity. }
  destruct (combine_union_hom f _ pbest (opt_m f) (fun a b c => opt_m_assoc f a b c Hf)) with (ss := ss) (st_raw := pempty) (st_part := pempty) (stu := stu)
    as [stc [E P]]; auto.
  - intros [|]; reflexivity.
  - intros v st st' _. rewrite Eraw. eauto.
  - intros v st s1 _. rewrite Eraw. eauto.
  - intros v st st' s1 H1 H2. rewrite Eraw in H1, H2. injection H1 as <-. injection H2 as <-. apply Hom.
  - intros vs s0 st H0. rewrite Epart. eexists; split; [reflexivity|].
    assert (NN : pbest s0 <> Some VNull) by (apply (best_not_null f vs pempty); auto; discriminate).
    assert (PV : pvalue f s0 = match pbest s0 with None => VNull | Some v => v end) by (destruct Hf; subst; reflexivity).
    rewrite PV. destruct (pbest s0) as [x|] eqn:Eb.
    + destruct x; [congruence| | |]; rewrite fold_best_spec by (auto; discriminate); reflexivity.
    + cbn. destruct (pbest st); reflexivity.
  - exists stc. split; auto. destruct Hf; subst; cbn [pvalue]; rewrite P; reflexivity.
Qed.

(** ** COUNT( * ) and COUNT *)

Definition counted (f : func) (v : value) : Z :=
  match f with CountStar => 1 | _ => if is_null v then 0 else 1 end.
Definition count_of (f : func) (vs : list value) : Z := fold_right (fun v n => counted f v + n) 0 vs.

Lemma count_of_nonneg : forall f vs, 0 <= count_of f vs.
Proof.
  induction vs as [|v vs IH]; simpl; [lia|].
  assert (0 <= counted f v) by (unfold counted; destruct f, (is_null v); lia). lia.
Qed.

Lemma count_of_app : forall f l1 l2, count_of f (l1 ++ l2) = count_of f l1 + count_of f l2.
Proof. induction l1 as [|v l1 IH]; intros l2; simpl; [reflexivity|]. rewrite IH. lia. Qed.

Lemma count_of_cons : forall f v vs, count_of f (v :: vs) = counted f v + count_of f vs.
Proof. reflexivity. Qed.

Lemma count_raw : forall f vs st, (f = Count \/ f = CountStar) ->
    exists st', fold_vals fold_raw f vs st = Ok st' /\ pcount st' = pcount st + count_of f vs.
Proof.
  intros f vs. induction vs as [|v vs IH]; intros st Hf.
  - exists st. split; [reflexivity|simpl; lia].
  - destruct Hf; subst; rewrite count_of_cons; cbn [fold_vals fold_raw bind].
    + destruct (is_null v) eqn:N; cbn [bind].
      * destruct (IH st (or_introl eq_refl)) as [st' [E P]]. exists st'. split; [exact E|]. unfold counted. rewrite ?N. lia.
      * destruct (IH {| pcount := pcount st + 1; psum := psum st; pbest := pbest st |} (or_introl eq_refl)) as [st' [E P]].
        exists st'. split; [exact E|]. simpl in P. unfold counted. rewrite ?N. lia.
    + destruct (IH {| pcount := pcount st + 1; psum := psum st; pbest := pbest st |} (or_intror eq_refl)) as [st' [E P]].
      exists st'. split; [exact E|]. simpl in P. unfold counted. lia.
Qed.

Lemma count_partials : forall f ss st, (f = Count \/ f = CountStar) -> 0 <= pcount st ->
    pcount st + count_of f (concat ss) <= max_int64 ->
    exists stc, fold_vals fold_partial f (map (shard_value f) ss) st = Ok stc /\
                pcount stc = pcount st + count_of f (concat ss).
Proof.
  intros f ss. induction ss as [|s ss IH]; intros st Hf H0 Hb; simpl.
  - exists st. split; [reflexivity|lia].
  - change (concat (s :: ss)) with (s ++ concat ss) in *. rewrite count_of_app in *. pose proof (count_of_nonneg f s). pose proof (count_of_nonneg f (concat ss)).
    destruct (count_raw f s pempty Hf) as [s0 [E P]]. simpl in P.
    unfold shard_value at 1. rewrite E.
    assert (PV : pvalue f s0 = VNum (count_of f s) 0) by (destruct Hf; subst; cbn [pvalue]; rewrite P; reflexivity).
    rewrite PV.
    assert (A : as_int64 (VNum (count_of f s) 0) = Some (count_of f s)).
    { change (as_int64 (VNum (count_of f s) 0)) with
        (if (- max_int64 - 1 <=? count_of f s) && (count_of f s <=? max_int64) then Some (count_of f s) else None).
      destruct ((- max_int64 - 1 <=? count_of f s) && (count_of f s <=? max_int64)) eqn:Ei; [reflexivity|].
      exfalso. apply andb_false_iff in Ei. destruct Ei as [Ei|Ei]; apply Z.leb_gt in Ei; unfold max_int64 in *; lia. }
    assert (B : (0 <=? count_of f s) && (pcount st + count_of f s <=? max_int64) = true).
    { apply andb_true_iff. split; apply Z.leb_le; lia. }
    assert (Step : fold_partial f (VNum (count_of f s) 0) st =
                   Ok {| pcount := pcount st + count_of f s; psum := psum st; pbest := pbest st |}).
    { destruct Hf; subst; cbn [fold_partial]; rewrite A, B; reflexivity. }
    rewrite Step. simpl.
    destruct (IH {| pcount := pcount st + count_of f s; psum := psum st; pbest := pbest st |} Hf) as [stc [Ec Pc]];
      simpl; try lia.
    exists stc. split; auto. simpl in Pc. lia.
Qed.

Theorem count_combine_union : forall f ss stu, (f = Count \/ f = CountStar) ->
    fold_vals fold_raw f (concat ss) pempty = Ok stu -> pcount stu <= max_int64 ->
    exists stc, fold_vals fold_partial f (map (shard_value f) ss) pempty = Ok stc /\
                pcount stc = pcount stu /\ pvalue f stc = pvalue f stu.
Proof.
  intros f ss stu Hf H Hb.
  destruct (count_raw f (concat ss) pempty Hf) as [st' [E P]]. rewrite H in E. injection E as <-.
  simpl in P. destruct (count_partials f ss pempty Hf) as [stc [Ec Pc]]; simpl; try lia.
  exists stc. split; auto. simpl in Pc. assert (pcount stc = pcount stu) by lia. split; auto.
  destruct Hf; subst; cbn [pvalue]; congruence.
Qed.

(** ** AVG: SUM and COUNT combined, divided once *)

(** The final AVG of a group from its SUM and COUNT partials ([final_value] of Aggregate.v). *)
Definition avg_value (sum cnt : pstate) : value :=
  let n := pcount cnt in
  if n =? 0 then VNull else match psum sum with Some (c, s) => avg_of c s n | None => VNull end.

Lemma final_value_avg : forall p g i j,
    final_value p g (FAvg i j) = avg_value (nth i (snd g) pempty) (nth j (snd g) pempty).
Proof. reflexivity. Qed.

Theorem avg_combine_union : forall ss stS stC,
    fold_vals fold_raw Sum (concat ss) pempty = Ok stS ->
    fold_vals fold_raw Count (concat ss) pempty = Ok stC -> pcount stC <= max_int64 ->
    exists stS' stC',
      fold_vals fold_partial Sum (map (shard_value Sum) ss) pempty = Ok stS' /\
      fold_vals fold_partial Count (map (shard_value Count) ss) pempty = Ok stC' /\
      avg_value stS' stC' = avg_value stS stC.
Proof.
  intros ss stS stC HS HC Hb.
  destruct (sum_combine_union ss stS HS) as [stS' [ES [PS _]]].
  destruct (count_combine_union Count ss stC (or_introl eq_refl) HC Hb) as [stC' [EC [PC _]]].
  exists stS', stC'. split; auto. split; auto. unfold avg_value. rewrite PS, PC. reflexivity.
Qed.

(** ** GROUP BY: the rows of a group in the union are the group's rows of each shard, in
    shard order (NULLs in one group, numbers by value: [key_eqb] compares with [vcmp]) *)
Theorem group_of_union : forall (key : row -> row) (k : row) (ss : list (list row)),
    filter (fun r => key_eqb (key r) k) (concat ss) = concat (map (filter (fun r => key_eqb (key r) k)) ss).
Proof.
  intros key k ss. induction ss as [|s ss IH]; simpl; [reflexivity|]. rewrite filter_app, IH. reflexivity.
Qed.
